"""Routes answered ahead of the middleware stack, and the machinery that takes them there."""
