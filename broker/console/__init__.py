"""The web console on the HTTP port (docs/console.md)."""
