"""The HTTP API's routes, one module per noun, and the bodies they take."""
