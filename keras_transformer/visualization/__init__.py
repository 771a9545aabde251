"""Pictures of what the model does: attention heat maps."""
