# Stands in for versity/versitygw:v1.8.0: the same binary built with `go
# install`, the module's own docker-entrypoint.sh (it builds the command line
# from VGW_BACKEND and VGW_BACKEND_ARG) and busybox for its shell and the
# health check's wget. Context: versitygw, docker-entrypoint.sh, busybox.
FROM scratch
COPY busybox /bin/busybox
RUN ["/bin/busybox", "--install", "-s", "/bin"]
COPY versitygw docker-entrypoint.sh /usr/local/bin/
COPY tmp /tmp
ENV PATH=/usr/local/bin:/bin
ENTRYPOINT ["/bin/sh", "/usr/local/bin/docker-entrypoint.sh"]
