# Replaces the amazon/aws-cli image of docker-compose.yml's s3-init and
# bundle-upload services: deploy/s3init built static. Context: s3init.
FROM scratch
COPY s3init /usr/local/bin/s3init
ENV PATH=/usr/local/bin
ENTRYPOINT ["s3init"]
