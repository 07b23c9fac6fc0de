"""The file spark-submit runs (SparkApplication.mainApplicationFile): the image copies
it to /opt/onceflow/spark-main.py, and it hands over to ``onceflow spark-job``."""

import sys

from onceflow.cli import main

if __name__ == "__main__":
    sys.exit(main(["spark-job", *sys.argv[1:]]))
