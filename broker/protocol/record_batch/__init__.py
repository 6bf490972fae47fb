"""RecordBatch v2: the one place that knows the layout (``layout.py``), the one record
walk (``walk.py``, optionally compiled) and the sinks fed by it (``record_sinks.py``),
the encoder (``encoder.py``), header checks (``batch_checks.py``) and Kafka's
LogValidator (``validator.py``).

Import names from the module that defines them; ``broker/protocol/records.py`` gathers
the public ones for code outside the broker's core. This file imports nothing, so the
package has no import cycle through it.
"""
