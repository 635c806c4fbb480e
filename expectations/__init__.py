"""Great Expectations suites per released table, and the gate that runs them before a release."""
