"""The transaction coordinator (Kafka's TransactionCoordinator and its state)."""
