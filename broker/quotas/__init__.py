"""Client quotas (KIP-13, KIP-124, KIP-219): configs, quota managers, persistence."""
