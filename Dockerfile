# Spindle's image for hosts with a container engine: the same contents as the image
# scripts/install.d/25-image.sh builds without one (e2e/controlplane/spindle_image.py): Debian
# bookworm, Python 3.11 with Spindle in /opt/spindle, JRE 17 for Spark, tini, the entrypoint that
# runs any command and Spark-on-Kubernetes' `driver`/`executor`, and the unprivileged uid 65532
# with a passwd entry (Spark needs one). One image runs the operator, the brokers and Spark.
#   docker build -t spindle:latest .
FROM debian:bookworm-slim
RUN apt-get update \
    && apt-get install -y --no-install-recommends python3 python3-venv openjdk-17-jre-headless \
        ca-certificates tini \
    && rm -rf /var/lib/apt/lists/* \
    && echo 'spindle:x:65532:65532:Spindle:/home/spindle:/usr/sbin/nologin' >> /etc/passwd \
    && echo 'spindle:x:65532:' >> /etc/group \
    && mkdir -p /home/spindle && chown 65532:65532 /home/spindle
WORKDIR /src
COPY pyproject.toml README.md ./
COPY broker/ broker/
COPY operator/ operator/
COPY rebalance/ rebalance/
RUN python3 -m venv /opt/spindle \
    && /opt/spindle/bin/pip install --no-cache-dir . \
    && rm -rf /src
COPY e2e/controlplane/spindle-entrypoint.sh /usr/local/bin/spindle-entrypoint
ENV PATH=/opt/spindle/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
    JAVA_HOME=/usr/lib/jvm/java-17-openjdk-amd64 \
    SPARK_HOME=/opt/spindle/lib/python3.11/site-packages/pyspark \
    PYSPARK_PYTHON=/opt/spindle/bin/python \
    PYTHONSAFEPATH=1 \
    LANG=C.UTF-8
USER 65532:65532
WORKDIR /home/spindle
ENTRYPOINT ["/usr/bin/tini", "--", "/usr/local/bin/spindle-entrypoint"]
