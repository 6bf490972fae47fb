"""The group coordinator: classic consumer groups and committed offsets (Kafka's GroupCoordinator)."""
