import { BadRequestException, HttpException, Inject, Injectable, Logger } from '@nestjs/common';
import { LabelSelectorError, parseLabelSelector } from '../k8s/label-selector.js';
import { APP_CONFIG, type AppConfig } from '../config/config.js';
import { StreamOwner } from '../streams/stream-owner.js';
import { parseStatus, type WatchRefusal } from './shared-watch.js';
import { WatchEvent } from '../k8s/watch-events.js';
import { WatchHub } from './watch-hub.js';
import { type WatchRequest, WatchStream } from './watch-stream.js';

/**
 * Objects per page of the initial list (a stream without a resourceVersion starts with every current
 * object): small, so that what one stream holds at a time stays small, however large the collection.
 */
const PAGE_SIZE = 100;
const PAGE_BYTES_LIMIT = 32 * 1024 * 1024;
const LAST_EVENT_ID = /^[0-9A-Za-z._:-]{1,64}$/;

interface ListPage {
  resourceVersion: string;
  continue?: string;
  items: Array<Record<string, any>>;
}

/** Opens client watch streams: admission, the initial list when asked for, and joining the shared watch. */
@Injectable()
export class WatchService {
  private readonly logger = new Logger(WatchService.name);

  constructor(
    @Inject(APP_CONFIG) private readonly config: AppConfig,
    private readonly hub: WatchHub,
    private readonly owner: StreamOwner,
  ) {}

  /**
   * Starts the stream on `req.reply` and resolves null once it runs; or resolves to the cluster's
   * refusal (its status and Status body, for the route to pass through) before anything was sent.
   */
  async open(req: WatchRequest): Promise<WatchRefusal | null> {
    if (req.format === 'sse') {
      const lastEventId = req.request.headers['last-event-id'];
      if (lastEventId !== undefined && lastEventId !== '') {
        if (typeof lastEventId !== 'string' || !LAST_EVENT_ID.test(lastEventId)) {
          throw new BadRequestException(['Last-Event-ID must be a resourceVersion this service sent as an event id']);
        }
        req = { ...req, resourceVersion: lastEventId };
      }
    }
    const selector = labelSelectorOf(req.source.labelSelector);
    const ticket = this.owner.admit(req.caller, 'watch');
    if (this.hub.budget.used > this.hub.budget.limit) {
      ticket.release();
      throw new HttpException(
        { message: 'the watches of this replica hold as many events as they may; try again later', retryAfter: 5 },
        429,
      );
    }
    const stream = new WatchStream(req, this.owner, this.config.watch.subscriberBufferBytes, selector);
    this.owner.own(stream, ticket);
    try {
      const refused = await req.clusterCheck?.(req.caller);
      if (refused) throw new HttpException(refused, 403);
      const fromList = req.resourceVersion === undefined || req.resourceVersion === '0';
      return fromList ? await this.openWithList(stream) : await this.openFrom(stream, req.resourceVersion!);
    } catch (error) {
      if (stream.started) {
        // Too late for an error response: the client gets the failure as the stream's last event.
        if (error instanceof HttpException) {
          stream.refuse(error.getStatus(), error.getStatus() === 504 ? 'Timeout' : 'ServiceUnavailable', error.message);
        } else {
          this.logger.error(`watch stream failed: ${(error as Error)?.stack ?? String(error)}`);
          stream.refuse(500, 'InternalError', 'internal error');
        }
        return null;
      }
      if (!stream.closed) stream.abandon();
      throw error;
    }
  }

  private async openFrom(stream: WatchStream, resourceVersion: string): Promise<WatchRefusal | null> {
    const joined = await this.hub.subscribe(stream.req.source, resourceVersion, stream);
    if ('refusal' in joined) {
      // An EventSource cannot read an error body: an expired version reaches it as the ERROR event it expects.
      if (stream.isSse && joined.refusal.statusCode === 410) {
        stream.begin();
        stream.close(WatchEvent.of('ERROR', parseStatus(joined.refusal)));
        return null;
      }
      stream.abandon();
      return joined.refusal;
    }
    stream.joined(joined.watch);
    stream.begin();
    return null;
  }

  /**
   * Every current object as an ADDED event, read as the caller page by page at the client's pace (no
   * page is read before the client has taken the one before), then the changes since.
   */
  private async openWithList(stream: WatchStream): Promise<WatchRefusal | null> {
    const { req } = stream;
    let page = await this.listPage(req, undefined);
    if ('refusal' in page) {
      stream.abandon();
      return page.refusal;
    }
    const resourceVersion = page.resourceVersion;
    stream.begin();
    for (;;) {
      for (const item of page.items) {
        if (stream.backlogged) await stream.drained();
        if (stream.closed) return null;
        stream.deliverInitial(
          WatchEvent.of('ADDED', {
            // the order the cluster writes them in: kind and apiVersion first
            kind: item.kind ?? req.kind,
            apiVersion: item.apiVersion ?? req.apiVersion,
            ...item,
          }),
        );
      }
      if (!page.continue || stream.closed) break;
      await stream.drained();
      if (stream.closed) break;
      const next = await this.listPage(req, page.continue);
      if ('refusal' in next) {
        stream.close(WatchEvent.of('ERROR', parseStatus(next.refusal)));
        return null;
      }
      page = next;
    }
    if (stream.closed) return null;
    stream.position(resourceVersion);
    const joined = await this.hub.subscribe(req.source, resourceVersion, stream);
    if ('refusal' in joined) stream.close(WatchEvent.of('ERROR', parseStatus(joined.refusal)));
    else stream.joined(joined.watch);
    return null;
  }

  private async listPage(req: WatchRequest, token: string | undefined): Promise<ListPage | { refusal: WatchRefusal }> {
    const query = new URLSearchParams({ limit: String(PAGE_SIZE) });
    if (req.source.labelSelector) query.set('labelSelector', req.source.labelSelector);
    if (req.source.fieldSelector) query.set('fieldSelector', req.source.fieldSelector);
    if (token) query.set('continue', token);
    const cluster = req.asCaller;
    const res = await cluster.send({ method: 'GET', path: req.source.path, query });
    const body = await cluster.read(res, PAGE_BYTES_LIMIT);
    const contentType = String(res.headers['content-type'] ?? 'application/json');
    if (res.statusCode !== 200) return { refusal: { statusCode: res.statusCode, contentType, body } };
    const list = cluster.parse(body, 'a page of the list') as {
      metadata?: { resourceVersion?: string; continue?: string };
      items?: Array<Record<string, any>>;
    };
    return {
      resourceVersion: list?.metadata?.resourceVersion ?? '',
      continue: list?.metadata?.continue || undefined,
      items: Array.isArray(list?.items) ? list.items : [],
    };
  }
}

/** The client's label selector, parsed here because the shared watch filters by it (a bad one is a 400, as from the apiserver). */
function labelSelectorOf(text: string | undefined) {
  if (!text) return undefined;
  try {
    return parseLabelSelector(text);
  } catch (error) {
    if (error instanceof LabelSelectorError) throw new BadRequestException([`labelSelector: ${error.message}`]);
    throw error;
  }
}
