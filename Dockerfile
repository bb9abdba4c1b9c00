# syntax=docker/dockerfile:1
# One build stage for every igw binary; one small runtime image per binary:
#   docker build --target manager -t igw-manager .
#   docker build --target epp     -t igw-epp .
#   docker build --target bbr     -t igw-bbr .
FROM golang:1.26.8-bookworm AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN --mount=type=cache,target=/root/go/pkg/mod go mod download
COPY . .
ARG TARGETOS=linux TARGETARCH=amd64
# The release the binaries report (--version) and whose EPP/BBR image tags the
# operator deploys by default: `docker build --build-arg VERSION=$(VERSION)`.
ARG VERSION=0.1.0
RUN --mount=type=cache,target=/root/go/pkg/mod --mount=type=cache,target=/root/.cache/go-build \
    for cmd in manager epp bbr; do \
      CGO_ENABLED=0 GOOS=$TARGETOS GOARCH=$TARGETARCH go build -trimpath -ldflags="-s -w -X github.com/igw-dev/igw/internal/version.Version=${VERSION}" -o /out/$cmd ./cmd/$cmd || exit 1; \
    done

FROM gcr.io/distroless/static-debian12:nonroot AS manager
COPY --from=build /out/manager /manager
USER 65532:65532
ENTRYPOINT ["/manager"]

FROM gcr.io/distroless/static-debian12:nonroot AS epp
COPY --from=build /out/epp /epp
USER 65532:65532
EXPOSE 9002 9003 9090
ENTRYPOINT ["/epp"]

FROM gcr.io/distroless/static-debian12:nonroot AS bbr
COPY --from=build /out/bbr /bbr
USER 65532:65532
EXPOSE 9004 9006
ENTRYPOINT ["/bbr"]
