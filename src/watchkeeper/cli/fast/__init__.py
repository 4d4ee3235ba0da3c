"""The commands typed or sent most, read and answered without the command-line framework."""
