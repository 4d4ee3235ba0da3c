"""Helpers every kind of test shares: waiting for a state, running the command line."""
