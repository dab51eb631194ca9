"""The APIs the HTTP target speaks, one folder each: its request form, conversion and decoding."""
