FROM golang:1.26 AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
RUN CGO_ENABLED=0 go build -trimpath -o /out/distributor ./cmd/distributor

FROM gcr.io/distroless/static-debian12
COPY --from=build /out/distributor /usr/local/bin/distributor
ENTRYPOINT ["/usr/local/bin/distributor"]
