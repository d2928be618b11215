# syntax=docker/dockerfile:1
# Marlowe: one static binary. `docker compose up` (docker-compose.yml) runs it with
# Postgres (pgvector) and Redis; `docker run IMAGE` alone gives the embedded default
# (SQLite under /data, in-process bus, the sandbox surface).

FROM golang:1.26 AS build
WORKDIR /src
# Dependencies first, so code edits do not re-download modules.
COPY go.mod go.sum* ./
RUN go mod download
COPY . .
# `bot version` prints it: docker compose build --build-arg VERSION=v1.2.3
ARG VERSION=dev
RUN CGO_ENABLED=0 go build -trimpath -ldflags="-s -w -X main.version=${VERSION}" -o /bot ./cmd/bot \
 && mkdir -p /out/data

FROM gcr.io/distroless/static-debian12:nonroot
# distroless/static carries CA certificates and tzdata (routines run on cron in zones).
COPY --from=build /bot /bot
# /data must belong to the non-root user; a named volume mounted there inherits this.
COPY --from=build --chown=65532:65532 /out/data /data
USER 65532:65532
ENV MARLOWE_DATA_DIR=/data
VOLUME ["/data"]
EXPOSE 8080 8081
ENTRYPOINT ["/bot"]
CMD ["serve"]
