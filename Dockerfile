# Operator, task and Spark-driver image: one image, three entry points of the
# `onceflow` CLI (operator, task, spark-job). Java is needed only by the Spark driver.
FROM python:3.11-slim-bookworm
RUN apt-get update \
 && apt-get install -y --no-install-recommends openjdk-17-jre-headless maven \
 && rm -rf /var/lib/apt/lists/*
WORKDIR /opt/onceflow
COPY pyproject.toml README.md ./
COPY operator ./operator
COPY scripts ./scripts
RUN pip install --no-cache-dir . \
 && ONCEFLOW_CACHE=/opt/onceflow/cache PYTHON=python bash scripts/spark-jars.sh \
 && cp "$(python -c 'import onceflow.spark.driver_main as m; print(m.__file__)')" /opt/onceflow/spark-main.py \
 && apt-get purge -y maven && apt-get autoremove -y && rm -rf /root/.m2
ENV ONCEFLOW_CACHE=/opt/onceflow/cache
USER 65532:65532
ENTRYPOINT ["onceflow"]
