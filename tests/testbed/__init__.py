"""Tests of the test bed itself: its scripts print only their values, and its services
(the broker, the API server, PostgreSQL) are the real things the product tests rely on."""
