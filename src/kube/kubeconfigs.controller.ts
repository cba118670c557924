import { Body, Controller, HttpCode, Post, Req, Res } from '@nestjs/common';
import { ApiResponse, ApiTags } from '@nestjs/swagger';
import type { FastifyReply, FastifyRequest } from 'fastify';
import { noteAudit } from '../common/audit-facts.js';
import { Auth, Authenticated } from '../auth/auth.decorators.js';
import type { Caller } from '../access/caller.js';
import { ApiErrors } from '../common/api-errors.js';
import { CreateKubeconfigDto } from './dto/kubeconfig.dto.js';
import { KubeconfigsService } from './kubeconfigs.service.js';

@ApiTags('Auth')
@Controller('auth')
export class KubeconfigsController {
  constructor(private readonly kubeconfigs: KubeconfigsService) {}

  /**
   * A kubeconfig for kubectl, client-go and @kubernetes/client-node: one context per cluster (the named
   * ones, or every enabled cluster the caller has a rule for), each pointing at
   * `<CAS_PUBLIC_URL>/api/v1/clusters/<name>/k8s`, with `certificate-authority-data` when
   * `CAS_PUBLIC_CA_FILE` is set, and one new API key of the caller's with the caller's roles, expiring after
   * `expiresInSeconds` (listed and revocable with the caller's keys). Never a cluster's own credentials.
   */
  @Authenticated()
  @Post('kubeconfig')
  @HttpCode(201)
  @ApiResponse({
    status: 201,
    description: 'The kubeconfig (YAML): `kubectl --kubeconfig <file> get pods` works with it as it is',
    content: { 'application/yaml': { schema: { type: 'string' } } },
  })
  @ApiErrors(400, {
    403: 'The caller has no rule on a named cluster (or on any enabled cluster), or cannot own an API key',
  })
  async createKubeconfig(
    @Auth() caller: Caller,
    @Body() dto: CreateKubeconfigDto,
    @Req() request: FastifyRequest,
    @Res({ passthrough: true }) reply: FastifyReply,
  ): Promise<string> {
    const minted = await this.kubeconfigs.createKubeconfig(caller, dto);
    noteAudit(request, { target: { kind: 'apiKey', id: String(minted.keyId) } });
    // Set here, not by decorator: an error on the way must still leave as JSON.
    void reply.header('content-type', 'application/yaml; charset=utf-8').header('cache-control', 'no-store');
    return minted.yaml;
  }
}
