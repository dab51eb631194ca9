"""The models the torch runner computes with."""
