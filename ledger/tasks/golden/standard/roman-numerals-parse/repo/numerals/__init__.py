"""Number notations."""
