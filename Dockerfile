# The service's image for docker-compose.yml: the API (`npm start`) and the worker (`npm run worker`)
# run from it. The source is copied in, so containers never mount the host checkout.
FROM node:24-bookworm-slim
WORKDIR /app
ENV NODE_ENV=production
COPY . .
# Runtime dependencies only (tsx runs the TypeScript sources); workspaces keep their own.
RUN npm ci --omit=dev --no-audit --no-fund && npm cache clean --force
# Runs as the image's unprivileged user; DATA_DIR is a named volume that user owns.
RUN mkdir -p /var/lib/workflow-runs && chown node:node /var/lib/workflow-runs
USER node
ENV DATA_DIR=/var/lib/workflow-runs
EXPOSE 8080
CMD ["npm", "start"]
