"""Reusable test doubles: a programmable fake agent server and a loopback-only network."""
