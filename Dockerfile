# A static marketd binary on a distroless base: no shell, no package manager.
FROM golang:1.26 AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
RUN CGO_ENABLED=0 go build -trimpath -ldflags "-s -w" -o /out/marketd ./cmd/marketd

FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /out/marketd /usr/local/bin/marketd
USER nonroot:nonroot
EXPOSE 8080 8081
ENTRYPOINT ["/usr/local/bin/marketd"]
CMD ["all"]
