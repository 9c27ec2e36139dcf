# The Spindle operator image used by charts/spindle (image.repository spindle/operator).
# Not built on our machines (no Docker engine there); `docker build -t spindle/operator:0.1.0 .`
# on a host that has one, then `kind load docker-image` (see e2e/kind/).
FROM python:3.12-slim AS build
WORKDIR /src
COPY pyproject.toml README.md ./
COPY broker/ broker/
COPY operator/ operator/
COPY rebalance/ rebalance/
RUN pip wheel --no-cache-dir --wheel-dir /wheels .

FROM python:3.12-slim
RUN --mount=type=bind,from=build,source=/wheels,target=/wheels \
    pip install --no-cache-dir /wheels/*.whl
# 65532: the unprivileged user the chart's securityContext (runAsNonRoot) runs it as.
USER 65532:65532
ENTRYPOINT ["spindle-operator"]
CMD ["run", "--all-namespaces"]
