# A static marketd binary on a distroless base: no shell, no package manager.
# GO_VERSION is go.mod's `go` line to the patch (a test checks): the image
# builds with GOTOOLCHAIN=local, so an older Go would refuse go.mod.
# Cache mounts (BuildKit, the default builder) keep modules and compiled
# packages between builds: a rebuild after a code change takes seconds.
ARG GO_VERSION=1.26.8
FROM golang:${GO_VERSION}-bookworm AS build
WORKDIR /src
ENV CGO_ENABLED=0 GOTOOLCHAIN=local
COPY go.mod go.sum ./
RUN --mount=type=cache,target=/go/pkg/mod go mod download
COPY . .
RUN --mount=type=cache,target=/go/pkg/mod --mount=type=cache,target=/root/.cache/go-build \
    go build -trimpath -ldflags "-s -w" -o /out/marketd ./cmd/marketd

FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /out/marketd /usr/local/bin/marketd
USER nonroot:nonroot
EXPOSE 8080 8081
ENTRYPOINT ["/usr/local/bin/marketd"]
CMD ["all"]
