"""The HTTP layer under the routes: the protocol's limits, auth, errors and held requests."""
