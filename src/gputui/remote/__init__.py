"""How commands reach the machine: transports (ssh, local), targets (a
transport plus the container, whose argv gputui.containers builds), the
stdin-EOF watchdog, quoting."""
