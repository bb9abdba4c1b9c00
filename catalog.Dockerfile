# The OLM catalog image of the file-based catalog `make catalog` writes:
#   docker build -f catalog.Dockerfile -t ghcr.io/igw-dev/igw-catalog:0.1.0 .
# then point a CatalogSource at it (docs/quickstart.md).
FROM quay.io/operator-framework/opm:v1.47.0
ENTRYPOINT ["/bin/opm"]
CMD ["serve", "/configs", "--cache-dir=/tmp/cache"]
ADD catalog /configs
LABEL operators.operatorframework.io.index.configs.v1=/configs
