# The browser pods' image: a Playwright browser server with Playwright's own Chromium.
#
#   docker build -f templates/k8s/browser-server.Dockerfile -t owrl-browser-server:1.65 .
#
# PLAYWRIGHT_VERSION must be the Playwright that owrl runs with (pip show playwright): a
# server of another version refuses the connection.
FROM python:3.11-slim
ARG PLAYWRIGHT_VERSION=1.65.2
ENV PLAYWRIGHT_BROWSERS_PATH=/ms-playwright
RUN pip install --no-cache-dir "playwright==${PLAYWRIGHT_VERSION}" \
    && playwright install --with-deps chromium \
    && useradd --uid 1000 --create-home browser
USER 1000
EXPOSE 3000
CMD ["python", "-m", "playwright", "run-server", "--host", "0.0.0.0", "--port", "3000"]
