"""How commands reach the machine: transports (ssh, local), the container
wrapper (pct exec), the stdin-EOF watchdog, quoting."""
