# Stands in for nats:2.11-alpine: nats-server built with `go install`, and
# busybox for the wget of docker-compose.yml's health check. Context:
# nats-server, busybox (both static).
FROM scratch
COPY busybox /bin/busybox
RUN ["/bin/busybox", "--install", "-s", "/bin"]
COPY nats-server /usr/local/bin/nats-server
ENV PATH=/usr/local/bin:/bin
ENTRYPOINT ["nats-server"]
