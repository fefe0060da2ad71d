"""SASL mechanisms."""
