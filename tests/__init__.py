"""pyprod's tests; tests.harness is the harness they, bench/ and scripts/ share."""
