"""Test support, never imported by the store: fault injection and the emulators the tests and demo run."""
