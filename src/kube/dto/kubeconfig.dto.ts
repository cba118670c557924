import { ApiPropertyOptional } from '@nestjs/swagger';
import {
  ArrayMaxSize,
  ArrayMinSize,
  ArrayUnique,
  IsArray,
  IsInt,
  IsOptional,
  IsString,
  Matches,
  Min,
} from 'class-validator';
import { CLUSTER_NAME_PATTERN } from '../../clusters/cluster-name.js';

export class CreateKubeconfigDto {
  /** The clusters to include, one context each; default: every enabled cluster the caller has a rule for. */
  @ApiPropertyOptional({ type: [String], minItems: 1, maxItems: 100, uniqueItems: true, example: ['prod'] })
  @IsOptional()
  @IsArray()
  @ArrayMinSize(1)
  @ArrayMaxSize(100)
  @ArrayUnique()
  @IsString({ each: true })
  @Matches(CLUSTER_NAME_PATTERN, {
    each: true,
    message: 'each of clusters must be a cluster name: 1–253 printable characters without spaces',
  })
  clusters?: string[];

  /**
   * How long the kubeconfig's key works, in seconds: default 8 hours, at most `CAS_KUBECONFIG_MAX_SECONDS`
   * (7 days unless configured).
   */
  @ApiPropertyOptional({ type: 'integer', minimum: 1, example: 28800 })
  @IsOptional()
  @Min(1)
  @IsInt()
  expiresInSeconds?: number;
}
