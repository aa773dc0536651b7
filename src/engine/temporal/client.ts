import { Client, Connection, WorkflowNotFoundError } from '@temporalio/client';
import { WorkflowExecutionAlreadyStartedError } from '@temporalio/common';
import type { NativeConnection } from '@temporalio/worker';
import { ConfigError, type Config } from '../../config/config.ts';
import { clientTracingInterceptors } from '../../observability/temporal-tracing.ts';
import { withStoredTrace } from '../../observability/tracing.ts';
import { ensureSearchAttributes } from './search-attributes.ts';
import { temporalPriority, type RunFlow } from './run-priority.ts';
import {
  admittedSignal,
  credentialsSuppliedSignal,
  RUN_WORKFLOW_TYPE,
  searchAttributes,
  type RunMemo,
  type RunWorkflowArgs,
} from '../../../workflows/definitions.ts';
import type { runWorkflow } from '../../../workflows/run-workflow.ts';
import { SERVING } from './dev-server.ts';

/**
 * What the Temporal engine needs from Temporal, as a small interface so the engine's admission and
 * sweep logic is testable against the real database without a Temporal server (a fake implements it).
 */
export interface RunWorkflowClient {
  /** Starts the run's workflow (id = run id). Idempotent: an existing execution is `already_started`. */
  start(memo: RunMemo, opts: { admitted: boolean }): Promise<'started' | 'already_started'>;
  /** Signals `admitted`, starting the workflow first when it does not exist (signal-with-start). */
  admit(memo: RunMemo): Promise<'signalled' | 'closed'>;
  /** Signals an open workflow; false when there is no open execution for the run. */
  signal(runId: string, signal: 'credentialsSupplied'): Promise<boolean>;
  /**
   * Requests the Temporal cancellation of the run's workflow (the run's cancellation is committed
   * already), so its execution closes as Canceled; false when there is no open execution for the run.
   */
  cancel(runId: string): Promise<boolean>;
  /**
   * Run ids with a workflow execution on this task queue that Temporal itself closed (terminated, timed
   * out) after `since`; src/engine/temporal/reconcile-closed.ts.
   */
  listClosedByTemporal?(since: Date): Promise<string[]>;
  /**
   * How the run's latest workflow execution was closed by Temporal, or null when it is open or ended by
   * the workflow (a reset leaves a terminated execution behind a new one that carries on).
   */
  closedByTemporal?(runId: string): Promise<ClosedByTemporal | null>;
  /** Temporal reachable (a health check with a short deadline). */
  ready(timeoutMs: number): Promise<boolean>;
  /**
   * At start: the server answers, the namespace exists, the search attributes are registered (added
   * when missing). Throws a ConfigError with one clear line otherwise.
   */
  prepare?(): Promise<void>;
  close(): Promise<void>;
}

/** A run's memo and its stored trace context, which the workflow start carries in its headers (docs/tracing.md). */
export type TracedMemo = RunMemo & RunFlow & { traceContext?: unknown; deadline?: number };

/** How Temporal closed a run's workflow without the workflow ending it. */
export type ClosedByTemporal = 'terminated' | 'timed_out';

/** The server did not answer at start (a ConfigError: one line); a worker waiting for Temporal retries on it. */
export class TemporalUnreachableError extends ConfigError {}

export type TemporalAddress = Pick<Config['temporal'], 'address' | 'namespace' | 'taskQueue'>;

const SIGNALS = { credentialsSupplied: credentialsSuppliedSignal } as const;

export interface TemporalRunClientOptions {
  /**
   * A worker for the task queue runs in this process on the connection `workerConnection()` gives:
   * starts then ask for eager execution, and the server hands the run's first workflow task to that
   * worker in the start's answer instead of through the task queue. Eager start needs the client and
   * the worker on one NativeConnection.
   */
  eagerStart?: boolean;
}

/**
 * The real client: connects lazily (the first call), with `TEMPORAL_ADDRESS` / `TEMPORAL_NAMESPACE` /
 * `TEMPORAL_TASK_QUEUE`. Workflow ids are run ids and may never be reused (REJECT_DUPLICATE): a run has
 * exactly one workflow execution chain.
 */
export class TemporalRunClient implements RunWorkflowClient {
  readonly #config: TemporalAddress;
  readonly #eagerStart: boolean;
  #client: Promise<Client> | null = null;
  #connection: Connection | NativeConnection | null = null;
  /** Calls in flight: close() waits for them (see there). */
  readonly #calls = new Set<Promise<unknown>>();

  constructor(config: TemporalAddress, opts: TemporalRunClientOptions = {}) {
    this.#config = config;
    this.#eagerStart = opts.eagerStart ?? false;
  }

  /** The connection this client starts workflows on, for the process's worker (eagerStart only). */
  async workerConnection(): Promise<NativeConnection> {
    if (!this.#eagerStart) throw new Error('the client has no worker connection without eagerStart');
    await this.#get();
    return this.#connection as NativeConnection;
  }

  async #connect(): Promise<Connection | NativeConnection> {
    if (!this.#eagerStart) return Connection.connect({ address: this.#config.address, connectTimeout: '5 seconds' });
    const { NativeConnection } = await import('@temporalio/worker');
    return NativeConnection.connect({ address: this.#config.address });
  }

  #get(): Promise<Client> {
    this.#client ??= (async () => {
      const connection = await this.#connect();
      this.#connection = connection;
      return new Client({ connection, namespace: this.#config.namespace, interceptors: { workflow: await clientTracingInterceptors() } });
    })().catch((err: unknown) => {
      this.#client = null; // try again on the next call
      throw err;
    });
    return this.#client;
  }

  /** Runs one call against Temporal, counted in #calls until it settles. */
  #track<T>(call: () => Promise<T>): Promise<T> {
    const p = call();
    const settled = p.then(
      () => undefined,
      () => undefined,
    );
    this.#calls.add(settled);
    void settled.then(() => this.#calls.delete(settled));
    return p;
  }

  #options(memo: TracedMemo) {
    const { runId, accountHandle, workflowId, versionId, workflowName, versionLabel } = memo;
    const runMemo: RunMemo = { runId, accountHandle, workflowId, versionId, workflowName, versionLabel };
    return {
      workflowId: memo.runId,
      taskQueue: this.#config.taskQueue,
      memo: { ...runMemo },
      // Temporal's user metadata: the UI's workflow list and page show these instead of a bare UUID.
      ...runMetadata(runMemo),
      // What operators filter on in the UI; the workflow keeps RunStatus / RunOutcome current.
      typedSearchAttributes: [
        { key: searchAttributes.accountHandle, value: memo.accountHandle },
        { key: searchAttributes.catalogWorkflowId, value: memo.workflowId },
        { key: searchAttributes.workflowVersionId, value: memo.versionId },
        { key: searchAttributes.runStatus, value: 'pending' },
      ],
      workflowIdReusePolicy: 'REJECT_DUPLICATE' as const,
      // The run's class and concurrency key, so Temporal's task queue keeps the service's order.
      priority: temporalPriority(memo.accountHandle, memo),
    };
  }

  start(memo: TracedMemo, opts: { admitted: boolean }): Promise<'started' | 'already_started'> {
    return this.#track(() => withStoredTrace(memo.traceContext, () => this.#start(memo, opts)));
  }

  async #start(memo: TracedMemo, opts: { admitted: boolean }): Promise<'started' | 'already_started'> {
    const client = await this.#get();
    try {
      const args: RunWorkflowArgs = { runId: memo.runId, ...(opts.admitted ? { admitted: true } : {}), ...deadlineOf(memo) };
      await client.workflow.start<typeof runWorkflow>(RUN_WORKFLOW_TYPE, {
        ...this.#options(memo),
        args: [args],
        ...(this.#eagerStart ? { requestEagerStart: true } : {}),
      });
      return 'started';
    } catch (err) {
      if (err instanceof WorkflowExecutionAlreadyStartedError) return 'already_started';
      throw err;
    }
  }

  admit(memo: TracedMemo): Promise<'signalled' | 'closed'> {
    return this.#track(() => withStoredTrace(memo.traceContext, () => this.#admit(memo)));
  }

  async #admit(memo: TracedMemo): Promise<'signalled' | 'closed'> {
    const client = await this.#get();
    try {
      await client.workflow.signalWithStart<typeof runWorkflow>(RUN_WORKFLOW_TYPE, {
        ...this.#options(memo),
        args: [{ runId: memo.runId, admitted: true, ...deadlineOf(memo) }],
        signal: admittedSignal,
      });
      return 'signalled';
    } catch (err) {
      // A closed execution with this id exists (the run ended): nothing to admit.
      if (err instanceof WorkflowExecutionAlreadyStartedError) return 'closed';
      throw err;
    }
  }

  signal(runId: string, signal: 'credentialsSupplied'): Promise<boolean> {
    return this.#track(() => this.#openOnly(async (client) => void (await client.workflow.getHandle(runId).signal(SIGNALS[signal]))));
  }

  cancel(runId: string): Promise<boolean> {
    return this.#track(() => this.#openOnly(async (client) => void (await client.workflow.getHandle(runId).cancel())));
  }

  /** Runs a call on an open execution: false when there is none (never started, or closed). */
  async #openOnly(call: (client: Client) => Promise<void>): Promise<boolean> {
    const client = await this.#get();
    try {
      await call(client);
      return true;
    } catch (err) {
      if (err instanceof WorkflowNotFoundError) return false;
      throw err;
    }
  }

  listClosedByTemporal(since: Date): Promise<string[]> {
    return this.#track(async () => {
      const client = await this.#get();
      const query =
        `WorkflowType = '${RUN_WORKFLOW_TYPE}' AND TaskQueue = '${this.#config.taskQueue.replace(/'/g, '')}'` +
        ` AND ExecutionStatus IN ('Terminated', 'TimedOut') AND CloseTime > '${since.toISOString()}'`;
      const ids = new Set<string>();
      for await (const execution of client.workflow.list({ query })) ids.add(execution.workflowId);
      return [...ids];
    });
  }

  closedByTemporal(runId: string): Promise<ClosedByTemporal | null> {
    return this.#track(async () => {
      const client = await this.#get();
      const latest = await client.workflow.getHandle(runId).describe();
      if (latest.status.name === 'TERMINATED') return 'terminated';
      if (latest.status.name === 'TIMED_OUT') return 'timed_out';
      return null;
    });
  }

  async prepare(): Promise<void> {
    const { address, namespace } = this.#config;
    const hint = 'start one with `npm run temporal`, or set TEMPORAL_ADDRESS';
    let connection: Connection | NativeConnection;
    try {
      await this.#get();
      connection = this.#connection!;
      await connection.healthService.check({});
    } catch (err) {
      throw new TemporalUnreachableError(`Temporal is not reachable at ${address} (TEMPORAL_ADDRESS): ${firstLine(err)}; ${hint}`);
    }
    try {
      await connection.workflowService.describeNamespace({ namespace });
    } catch (err) {
      if ((err as { code?: number }).code === 5) {
        throw new ConfigError(
          `the Temporal namespace "${namespace}" (TEMPORAL_NAMESPACE) does not exist at ${address}: ` +
            `create it with \`temporal operator namespace create --namespace ${namespace}\``,
        );
      }
      throw new ConfigError(`could not read the Temporal namespace "${namespace}" at ${address}: ${firstLine(err)}`);
    }
    try {
      await ensureSearchAttributes(connection, namespace);
    } catch (err) {
      throw new ConfigError(`could not register the run search attributes on the Temporal namespace "${namespace}": ${firstLine(err)}`);
    }
  }

  async ready(timeoutMs: number): Promise<boolean> {
    let timer: NodeJS.Timeout | undefined;
    const timeout = new Promise<boolean>((resolve) => {
      timer = setTimeout(() => resolve(false), timeoutMs);
    });
    // The deadline ends the call (and its retries) soon after the answer stopped mattering.
    const deadline = Date.now() + timeoutMs;
    const check = this.#track(async () => {
      await this.#get();
      const connection = this.#connection!;
      const res = await connection.withDeadline(deadline, () => connection.healthService.check({}));
      return res.status === SERVING;
    }).catch(() => false);
    try {
      return await Promise.race([check, timeout]);
    } finally {
      clearTimeout(timer);
    }
  }

  /**
   * Closes the connection once the calls in flight have settled: the SDK retries a call that failed
   * (Temporal unavailable) from a timer, and a retry on a closed connection throws from that timer,
   * which would crash the process (seen after a Temporal server restart).
   */
  async close(): Promise<void> {
    await Promise.all([...this.#calls]);
    const pending = this.#client;
    this.#client = null;
    if (pending) await pending.catch(() => undefined);
    await this.#connection?.close().catch(() => undefined);
    this.#connection = null;
  }
}

/** The summary (one line) and details (markdown) a run's workflow carries for the Temporal UI and `describe`. */
export function runMetadata(memo: RunMemo): { staticSummary: string; staticDetails: string } {
  return {
    staticSummary: `${memo.workflowName} ${memo.versionLabel} · ${memo.accountHandle}`,
    staticDetails: [
      `**Run** \`${memo.runId}\` (REST \`GET /v1/runs/${memo.runId}\`)`,
      `**Catalog workflow** ${memo.workflowName} \`${memo.workflowId}\``,
      `**Version** ${memo.versionLabel} \`${memo.versionId}\``,
      `**Account** ${memo.accountHandle} (the caller)`,
    ].join('\n\n'),
  };
}

function firstLine(err: unknown): string {
  const text = err instanceof Error ? err.message : String(err);
  return text.split('\n')[0].trim();
}

/** The run's Cancel-After deadline as its workflow's argument, when it has one. */
const deadlineOf = (memo: TracedMemo): Pick<RunWorkflowArgs, 'deadline'> => (memo.deadline === undefined ? {} : { deadline: memo.deadline });
