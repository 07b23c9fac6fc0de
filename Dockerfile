# One image for every role a pod gives it: the operator, a source task, a Spark
# driver and a Spark executor (image/entrypoint.sh dispatches on the first argument).
#
# BASE is a Debian bookworm rootfs. Elsewhere the default pulls Debian's own image;
# the test bed, which reaches no image registry, builds the same rootfs from Debian's
# packages (scripts/image.sh) and passes it in.
#
# The stages are ordered by how often their inputs change, so that a code change
# rebuilds only the last, small layer (seconds) and reuses the 2 GB below it:
# toolchain (no inputs) -> deps (the dependency list and the jar scripts) -> the JVM
# sink writer (its Java sources) -> runtime (the JRE and the user) -> the package itself.
ARG BASE=docker.io/library/debian:bookworm-slim

FROM ${BASE} AS toolchain
RUN apt-get update \
 && apt-get install -y --no-install-recommends \
      python3 python3-venv ca-certificates openjdk-17-jdk-headless maven \
 && rm -rf /var/lib/apt/lists/*

# Only the dependency list leaves this stage: an edit elsewhere in pyproject.toml (tool
# settings, the version) gives the same requirements.txt, and the layers built from it
# stay cached.
FROM toolchain AS requirements
COPY pyproject.toml /src/
RUN python3 -c 'import tomllib; print("\n".join(tomllib.load(open("/src/pyproject.toml", "rb"))["project"]["dependencies"]))' > /requirements.txt

FROM toolchain AS deps
WORKDIR /src
ENV VENV=/opt/onceflow/venv
COPY --from=requirements /requirements.txt ./
# setuptools and wheel stay in the venv so the package installs in the last stage
# without build isolation (no download for a code change).
RUN python3 -m venv "$VENV" \
 && "$VENV/bin/pip" install --no-cache-dir --disable-pip-version-check -r requirements.txt \
      "setuptools>=69" wheel
# Both sets go where Spark puts its own jars, on every driver's and executor's classpath:
# the Kafka connector, and S3A for s3a:// checkpoints and file sinks.
COPY scripts/lib.sh scripts/spark-jars.sh ./scripts/
COPY scripts/maven/spark-kafka ./scripts/maven/spark-kafka
COPY scripts/maven/spark-s3a ./scripts/maven/spark-s3a
RUN spark_home="$("$VENV/bin/python" -c 'import pyspark, os; print(os.path.dirname(pyspark.__file__))')" \
 && for set in kafka s3a; do \
      libs="$(ONCEFLOW_CACHE=/tmp/cache PYTHON="$VENV/bin/python" bash scripts/spark-jars.sh "$set")" \
      && cp -n "$libs"/*.jar "$spark_home/jars/" || exit 1; \
    done \
 && ln -s "$spark_home" /opt/onceflow/spark \
 && rm -rf /tmp/cache /root/.m2

# Onceflow's JVM exactly-once writer for the Spark Kafka sink, built against the venv's
# pyspark and tested (the marker contract shared with the Python writer among its tests).
# A stage of its own, on deps: a Java edit rebuilds it and one small layer below the
# package, never deps.
FROM deps AS jvm-writer
COPY scripts/jvm-writer.sh ./scripts/
COPY tests/fixtures/sink_marker_contract.json ./tests/fixtures/
COPY jvm/onceflow-spark-kafka ./jvm/onceflow-spark-kafka
RUN libs="$(ONCEFLOW_CACHE=/tmp/cache PYTHON="$VENV/bin/python" bash scripts/jvm-writer.sh)" \
 && mkdir -p /opt/onceflow/jars \
 && cp "$libs"/onceflow-spark-kafka-*.jar /opt/onceflow/jars/ \
 && rm -rf /tmp/cache /root/.m2

FROM ${BASE}
# tini reaps zombies and forwards signals as PID 1 (a SIGTERM must reach the task so
# it can finish its transaction); procps gives Spark's scripts `ps`.
RUN apt-get update \
 && apt-get install -y --no-install-recommends \
      python3 ca-certificates openjdk-17-jre-headless tini procps \
 && rm -rf /var/lib/apt/lists/* \
 && groupadd --gid 65532 onceflow \
 && useradd --uid 65532 --gid 65532 --home-dir /home/onceflow --create-home \
      --shell /usr/sbin/nologin onceflow
COPY --from=deps /opt/onceflow /opt/onceflow
# Spark's Kubernetes backend and Hadoop's login need a passwd entry for the user (the
# one above); SPARK_HOME makes pyspark and spark-submit find their jars.
ENV PATH=/opt/onceflow/venv/bin:$PATH \
    SPARK_HOME=/opt/onceflow/spark \
    PYSPARK_PYTHON=/opt/onceflow/venv/bin/python \
    PYTHONUNBUFFERED=1
COPY image/entrypoint.sh /opt/onceflow/entrypoint.sh
# The writer's jar linked into $SPARK_HOME/jars, where the Kafka connector's jars are
# too: on every driver's and executor's classpath without spark.jars.
COPY --from=jvm-writer /opt/onceflow/jars/ /opt/onceflow/jars/
RUN ln -s /opt/onceflow/jars/onceflow-spark-kafka-*.jar /opt/onceflow/spark/jars/
# The package last. pyproject names README.md as the long description; the image has
# no use for it, and a README edit must not rebuild the image.
COPY pyproject.toml /tmp/onceflow/
COPY operator /tmp/onceflow/operator
RUN echo "Onceflow" > /tmp/onceflow/README.md \
 && pip install --no-cache-dir --disable-pip-version-check --no-deps --no-build-isolation \
      /tmp/onceflow \
 && cp /opt/onceflow/venv/lib/python3*/site-packages/onceflow/spark/driver_main.py \
      /opt/onceflow/spark-main.py \
 && rm -rf /tmp/onceflow
WORKDIR /home/onceflow
USER 65532:65532
ENTRYPOINT ["/usr/bin/tini", "--", "/opt/onceflow/entrypoint.sh"]
