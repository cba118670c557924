import { Body, Controller, Headers, HttpCode, Post, Query, Req } from '@nestjs/common';
import { ApiBody, ApiConsumes, ApiOkResponse, ApiTags } from '@nestjs/swagger';
import type { FastifyRequest } from 'fastify';
import { noteAudit } from '../common/audit-facts.js';
import { Auth, Authenticated } from '../auth/auth.decorators.js';
import type { Caller } from '../access/caller.js';
import { ApiErrors } from '../common/api-errors.js';
import { MAX_APPLY_DOCUMENTS } from './apply-input.js';
import { ApplyService } from './apply.service.js';
import { ApplyQueryDto, ApplyResponseDto } from './dto/apply.dto.js';
import { ApiTargetCluster } from '../clusters/target-cluster.js';

/** A document as the body's schema describes it (the cluster judges the rest). */
const DOCUMENT = {
  type: 'object',
  additionalProperties: true,
  description:
    'A Kubernetes object (`apiVersion`, `kind`, `metadata.name`), or a `List` whose `items` are such objects',
  properties: {
    apiVersion: { type: 'string' },
    kind: { type: 'string' },
    metadata: { type: 'object', additionalProperties: true, properties: { name: { type: 'string' } } },
    items: { type: 'array', items: { type: 'object', additionalProperties: true } },
  },
};

@ApiTags('Apply')
@Controller('apply')
export class ApplyController {
  constructor(private readonly service: ApplyService) {}

  /**
   * Applies one or many documents by server-side apply, as `kubectl apply --server-side` does: Namespaces and
   * CustomResourceDefinitions first (a kind whose CRD is applied in the same request is usable once the cluster
   * serves it), each document authorized as `create` (absent) or `patch` (present). One result per document, in
   * the documents' order, with a unified diff of the object before and after; a document that fails does not
   * stop the others. A Secret's `data` and `stringData` values never appear (`***`). YAML aliases may expand
   * the documents to at most 20 MiB as JSON (400 naming the lines beyond).
   */
  @Authenticated()
  @Post()
  @HttpCode(200)
  @ApiTargetCluster()
  @ApiConsumes('application/yaml', 'application/json')
  @ApiBody({
    description: `At most ${MAX_APPLY_DOCUMENTS} documents and 10 MiB: a YAML stream (\`---\` between documents) as \`application/yaml\`, or JSON as \`application/json\`: one object, an array of objects, or a \`List\` (its \`items\` are applied).`,
    required: true,
    schema: {
      anyOf: [
        { type: 'string', description: 'YAML: one or more documents' },
        DOCUMENT,
        { type: 'array', items: DOCUMENT, maxItems: MAX_APPLY_DOCUMENTS },
      ],
    },
  })
  @ApiOkResponse({ type: ApplyResponseDto })
  @ApiErrors(400, 404, 409, 502, 504, {
    403: 'The caller may neither create nor patch on the cluster, or `fieldManager` names another user or key (`cas:…`)',
    503: 'The service is shutting down, or too many large YAML bodies wait for a parser: try again after `Retry-After` seconds (or send JSON)',
  })
  async applyResources(
    @Auth() caller: Caller,
    @Headers('x-cluster-name') cluster: string | undefined,
    @Body() body: unknown,
    @Query() query: ApplyQueryDto,
    @Req() request: FastifyRequest,
  ): Promise<ApplyResponseDto> {
    const { response, audited } = await this.service.apply(caller, cluster, body, query);
    noteAudit(request, { documents: audited });
    return response;
  }
}
