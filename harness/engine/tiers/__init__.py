"""The KV tiers below the device: CPU, disk, the shared store."""
