import { Controller, Get, Query } from '@nestjs/common';
import { ApiOkResponse, ApiTags } from '@nestjs/swagger';
import { Auth, Authenticated } from '../auth/auth.decorators.js';
import type { Caller } from '../access/caller.js';
import { ApiErrors } from '../common/api-errors.js';
import { SearchQueryDto, SearchResultDto } from './dto/search.dto.js';
import { SearchService } from './search.service.js';

@ApiTags('Clusters')
@Controller()
export class SearchController {
  constructor(private readonly searchService: SearchService) {}

  /**
   * Objects whose name contains `q` (case-insensitive) across clusters and resource types, from the list
   * caches. Only what the caller may list is searched: other types and namespaces are left out, never a 403.
   */
  @Authenticated()
  @Get('search')
  @ApiOkResponse({ type: SearchResultDto })
  @ApiErrors(400)
  searchResources(@Auth() caller: Caller, @Query() query: SearchQueryDto): Promise<SearchResultDto> {
    return this.searchService.search(caller, query);
  }
}
