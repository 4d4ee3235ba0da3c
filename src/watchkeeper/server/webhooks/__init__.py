"""Signed webhooks: chat platforms' presses and forges' deliveries."""
