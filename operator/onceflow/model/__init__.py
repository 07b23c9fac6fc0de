"""Pure: names and desired objects (task settings, ConfigMaps, pods) from specs."""
