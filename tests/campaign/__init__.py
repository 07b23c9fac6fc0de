"""The fault campaign (``make campaign``): real pipelines on the three-broker cluster
driven through a random schedule of every fault kind, audited exactly at the end, with
a timeline report. ``tests/integration/test_campaign.py`` is its small run."""
