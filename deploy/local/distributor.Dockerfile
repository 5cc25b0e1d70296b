# The distributor image of the Dockerfile at the repository root, built FROM
# scratch from a static binary that deploy/compose-smoke.sh compiled (no base
# image to pull). Context: distributor, srv/reports/ (empty), tmp/ (empty).
FROM scratch
COPY distributor /usr/local/bin/distributor
COPY --chown=65532:65532 srv/reports /srv/reports
COPY tmp /tmp
ENV PATH=/usr/local/bin
USER 65532:65532
WORKDIR /etc/distributor
HEALTHCHECK --interval=15s --timeout=5s --start-period=30s --retries=3 \
    CMD ["distributor", "health"]
ENTRYPOINT ["distributor"]
