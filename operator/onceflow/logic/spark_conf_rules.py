"""The Spark settings a tenant may put in a SparkJob's ``sparkConf`` without a platform
admin's say: tuning that stays inside the pods Onceflow renders, each with the shape
its value must have.

An allow-list rather than a list of refusals: Spark has hundreds of keys, new ones in
every release, and many pick a class, a URI or a file (a catalog plugin, a metastore's
jars, an event log directory, a node to run on) that escape the pod or the guarantee.
A key is refused unless it is here or the admin names it (chart value
``tenants.sparkConfKeys``). Values are checked too where the key is broad (a prefix) or
a value could name code, so that ``spark.sql.adaptive.`` cannot carry a class.

Spark splits ``--conf K=V`` at the first ``=`` and reads properties files line by line:
a key holding ``=`` or whitespace, or a value holding a line break, would set another
key than the one checked, so those are refused for every key, allowed or not.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

BOOLEAN = r"true|false"
COUNT = r"\d{1,9}"
FRACTION = r"\d{1,3}(\.\d{1,6})?"
SIZE = r"\d{1,12}[kmgtp]?b?"
"""Bytes, or with Spark's units: 512m, 2g, 64mb."""
DURATION = r"\d{1,9}(us|ms|s|m|min|h|d)?"
CORES = r"\d{1,4}(\.\d{1,3})?m?"
"""Kubernetes CPU quantities: 1, 0.5, 250m."""
SCALAR = r"-?\d[A-Za-z0-9_.:+-]{0,63}|[A-Za-z_-]{1,32}"
"""A number, size or duration, or one word (a boolean, a codec, a policy): never a
class name (``spark.sql.adaptive.customCostEvaluatorClass``), a path, a URI or a list."""
CODEC = r"lz4|lzf|snappy|zstd"


@dataclass(frozen=True)
class ConfRule:
    key: str
    """A key, or a prefix ending in "." for every key under it."""
    value: str
    """What the whole value must match (case-insensitive)."""

    def covers(self, key: str) -> bool:
        return key == self.key or (self.key.endswith(".") and key.startswith(self.key))


STATE_STORES = "|".join(
    re.escape(f"org.apache.spark.sql.execution.streaming.state.{name}")
    for name in ("HDFSBackedStateStoreProvider", "RocksDBStateStoreProvider")
)

TENANT_RULES = (
    # Memory, cores and parallelism of the driver and executors.
    ConfRule("spark.driver.memory", SIZE),
    ConfRule("spark.driver.memoryOverhead", SIZE),
    ConfRule("spark.driver.cores", COUNT),
    ConfRule("spark.driver.maxResultSize", SIZE),
    ConfRule("spark.executor.memory", SIZE),
    ConfRule("spark.executor.memoryOverhead", SIZE),
    ConfRule("spark.executor.cores", COUNT),
    ConfRule("spark.executor.heartbeatInterval", DURATION),
    ConfRule("spark.network.timeout", DURATION),
    ConfRule("spark.default.parallelism", COUNT),
    ConfRule("spark.memory.fraction", FRACTION),
    ConfRule("spark.memory.storageFraction", FRACTION),
    ConfRule("spark.memory.offHeap.enabled", BOOLEAN),
    ConfRule("spark.memory.offHeap.size", SIZE),
    ConfRule("spark.locality.wait", DURATION),
    ConfRule("spark.kryoserializer.buffer.max", SIZE),
    ConfRule("spark.shuffle.compress", BOOLEAN),
    ConfRule("spark.rdd.compress", BOOLEAN),
    ConfRule("spark.io.compression.codec", CODEC),
    ConfRule("spark.dynamicAllocation.", SCALAR),
    ConfRule("spark.ui.enabled", BOOLEAN),
    ConfRule("spark.ui.showConsoleProgress", BOOLEAN),
    # SQL planning and formats.
    ConfRule("spark.sql.shuffle.partitions", COUNT),
    ConfRule("spark.sql.adaptive.", SCALAR),
    ConfRule("spark.sql.session.timeZone", r"[A-Za-z0-9_/+:-]{1,64}"),
    ConfRule("spark.sql.ansi.enabled", BOOLEAN),
    ConfRule("spark.sql.caseSensitive", BOOLEAN),
    ConfRule("spark.sql.autoBroadcastJoinThreshold", r"-1|" + SIZE),
    ConfRule("spark.sql.broadcastTimeout", DURATION),
    ConfRule("spark.sql.files.maxPartitionBytes", SIZE),
    ConfRule("spark.sql.files.openCostInBytes", SIZE),
    ConfRule("spark.sql.execution.arrow.", SCALAR),
    ConfRule("spark.sql.parquet.", SCALAR),
    ConfRule("spark.sql.orc.", SCALAR),
    ConfRule("spark.sql.legacy.timeParserPolicy", r"legacy|corrected|exception"),
    # Streaming state and progress (the checkpoint's location is Onceflow's).
    ConfRule("spark.sql.streaming.stateStore.providerClass", STATE_STORES),
    ConfRule("spark.sql.streaming.stateStore.rocksdb.", SCALAR),
    ConfRule("spark.sql.streaming.stateStore.compression.codec", CODEC),
    ConfRule("spark.sql.streaming.minBatchesToRetain", COUNT),
    ConfRule("spark.sql.streaming.noDataMicroBatches.enabled", BOOLEAN),
    ConfRule("spark.sql.streaming.metricsEnabled", BOOLEAN),
    ConfRule("spark.sql.streaming.numRecentProgressUpdates", COUNT),
    ConfRule("spark.sql.streaming.multipleWatermarkPolicy", r"min|max"),
    # Pod resources on Kubernetes (identity, volumes, images, templates and placement
    # are the platform's: spec.image, spec.driver and spec.executor, or the admin).
    ConfRule("spark.kubernetes.driver.request.cores", CORES),
    ConfRule("spark.kubernetes.driver.limit.cores", CORES),
    ConfRule("spark.kubernetes.executor.request.cores", CORES),
    ConfRule("spark.kubernetes.executor.limit.cores", CORES),
    ConfRule("spark.kubernetes.memoryOverheadFactor", FRACTION),
    ConfRule("spark.kubernetes.allocation.batch.size", COUNT),
    ConfRule("spark.kubernetes.allocation.batch.delay", DURATION),
    ConfRule("spark.kubernetes.executor.deleteOnTermination", BOOLEAN),
)

PLAIN_KEY = re.compile(r"spark\.[A-Za-z0-9_./-]+")
"""What Spark reads as one key: no "=", no whitespace, nothing it would split ("/"
stays: label keys such as ``spark.kubernetes.node.selector.topology.kubernetes.io/zone``
are an admin's to allow)."""
LINE_BREAK = re.compile(r"[\x00-\x1f\x7f]")


def smuggled(key: str, value: str) -> str | None:
    """Why Spark would read ``key``/``value`` as another setting than the one checked."""
    if not PLAIN_KEY.fullmatch(key):
        return (
            "is not one Spark key (only letters, digits and '._-' after 'spark.'): Spark "
            "splits --conf at the first '=', so it would set another key than this one"
        )
    if LINE_BREAK.search(value):
        return (
            "has a line break or control character in its value, which would start another setting"
        )
    return None


def tenant_rule(key: str) -> ConfRule | None:
    """The rule allowing ``key`` to tenants, the most specific first; None if none does."""
    covering = [rule for rule in TENANT_RULES if rule.covers(key)]
    return max(covering, key=lambda rule: len(rule.key), default=None)


def value_refused(rule: ConfRule, value: str) -> bool:
    return re.fullmatch(rule.value, value, flags=re.IGNORECASE) is None
