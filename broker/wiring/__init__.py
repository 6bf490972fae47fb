"""How the broker is assembled: one module per subsystem, each a function that takes the
broker's context (broker/broker_context.py) and its own collaborators, registers the
subsystem's API handlers and returns what has a lifetime. `KafkaServer` calls them."""
