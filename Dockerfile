# The distributor image: a static binary on distroless, running as a
# non-root user.
#
#   docker build --build-arg VERSION=$(git describe --tags --always --dirty) -t distributor .
#
# GO_IMAGE and BASE_IMAGE name a mirror of the two base images where Docker
# Hub or gcr.io cannot be reached.
ARG GO_IMAGE=golang:1.26
ARG BASE_IMAGE=gcr.io/distroless/static-debian12:nonroot

FROM ${GO_IMAGE} AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
# VERSION is what `distributor version` prints and catalogs record. The
# context has no .git (.dockerignore), so an image built without it says
# "dev": docker-compose.yml passes DISTRIBUTOR_VERSION.
ARG VERSION=
RUN ldflags="-s -w"; \
    if [ -n "$VERSION" ]; then ldflags="$ldflags -X main.version=$VERSION"; fi; \
    CGO_ENABLED=0 go build -trimpath -ldflags "$ldflags" -o /out/distributor ./cmd/distributor \
    && /out/distributor --version \
    && mkdir -p /out/srv/reports

FROM ${BASE_IMAGE}
COPY --from=build /out/distributor /usr/local/bin/distributor
# A named volume mounted on /srv/reports starts with this owner, so the
# non-root user can write local destinations there.
COPY --from=build --chown=65532:65532 /out/srv/reports /srv/reports
USER 65532:65532
# The default --config (distributor.yaml) is /etc/distributor/distributor.yaml,
# for serve and for the health check alike.
WORKDIR /etc/distributor
# Alive: serve answers /healthz on http.listen (127.0.0.1:9090 by default).
# One-shot commands (publish, apply, ...) finish before it matters.
HEALTHCHECK --interval=15s --timeout=5s --start-period=30s --retries=3 \
    CMD ["distributor", "health"]
ENTRYPOINT ["distributor"]
