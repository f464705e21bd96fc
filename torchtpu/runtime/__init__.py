"""The only layer that talks to JAX/PJRT: platform, devices, transfers, memory."""
